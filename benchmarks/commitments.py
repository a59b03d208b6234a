"""Tensor commitment throughput (offchain/protocol/tensors.commit) against SHA-256 itself,
measured in one run on the same buffer (ratios: the machine may be shared).

  python benchmarks/commitments.py [--sizes-mb 64 512] [--threads 1 2] [--chunk 256] [--reps 3]

Per size: hashlib SHA-256 over the whole buffer in one call (one core: the ceiling), the
commitment of a float32 tensor of that size with the job's default chunk (256 elements = 1 KB)
at each thread count (the C chunk tree, offchain/protocol/chunktree.py), and, for the smallest
size, the pure-Python tree (one hashlib call per chunk: what commit() did before #40).
Bar (issue #40): commitment >= 0.8x SHA-256 a core, scaling with cores. Each is timed by wall
clock and by CPU seconds (every thread's): on a shared machine the wall clock cannot show
scaling, the CPU seconds still show the cost a core. A 1 KB chunk is 16 SHA-256 blocks of data
but costs 17 compressions (its leaf's tag and padding) + 2 (its share of the inner nodes): one
chain at a time would reach at most 16/19 = 0.84x of SHA-256 over the same bytes; the SHA-NI
path hashes two chunks at once (two chains fill sha256rnds2), which one long hashlib call cannot.
Writes benchmarks/results/commitments.json.

  python benchmarks/commitments.py --device cuda [--sizes-mb 1024]

On a GPU machine: a CUDA tensor committed where it lives (repops/cuda/kernels/sha256.cu: the
host reads the 32-byte top) against the host path (a download, then the C tree on every core),
the same root asserted. Bar (issue #40): >= 20 GB/s for a 1 GB tensor. Writes
benchmarks/results/commitments_gpu.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain.protocol import chunktree, merkle  # noqa: E402
from offchain.protocol.tensors import commit  # noqa: E402


def best_time(f, reps: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of every thread of this process): the second is
    what a core costs even when the machine is shared (wall time then says little)."""
    wall = cpu = float("inf")
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        f()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def measure(mb: int, threads: list, chunk: int, reps: int, python_path: bool) -> dict:
    a = np.random.default_rng(mb).standard_normal(mb * 2 ** 20 // 4).astype(np.float32)
    gb = a.nbytes / 1e9
    wall, cpu = best_time(lambda: hashlib.sha256(a).digest(), reps)
    sha, sha_cpu = gb / wall, gb / cpu
    row = {"mb": mb, "bytes": a.nbytes, "chunk_elements": chunk, "sha256_gbps": sha, "sha256_gb_per_cpu_s": sha_cpu,
           "commit": {}}
    roots = set()
    for t in threads:
        os.environ["VERDE_COMMIT_THREADS"] = str(t)
        wall, cpu = best_time(lambda: roots.add(commit(a, chunk)), reps)
        g, g_cpu = gb / wall, gb / cpu
        row["commit"][t] = {"gbps": g, "vs_sha256": g / sha, "vs_sha256_per_core": g / sha / t,
                            "gb_per_cpu_s": g_cpu, "vs_sha256_per_cpu_s": g_cpu / sha_cpu}
    if python_path:
        raw = a.tobytes()

        def python_commit():
            size = chunk * 4
            return merkle.root_of(merkle.leaf_hash(raw[i:i + size]) for i in range(0, len(raw), size))
        g = gb / best_time(python_commit, 1)[0]
        row["python_gbps"] = g
        row["python_vs_sha256"] = g / sha
    row["same_root_every_thread_count"] = len(roots) == 1
    return row


def measure_gpu(mb: int, chunk: int, reps: int) -> dict:
    import torch
    if not torch.cuda.is_available():
        sys.exit("--device cuda needs a CUDA GPU (torch.cuda.is_available() is False here)")
    x = torch.randn(mb * 2 ** 20 // 4, device="cuda")
    gb = x.numel() * 4 / 1e9
    if chunktree.device_runtime() is None:
        sys.exit("the GPU's chunk tree is unavailable (see the warning above): nothing to measure")
    roots = {}

    def timed(on_device: bool):
        os.environ["VERDE_COMMIT_ON_DEVICE"] = "1" if on_device else "0"
        try:
            torch.cuda.synchronize()
            wall, _ = best_time(lambda: roots.__setitem__(on_device, commit(x, chunk)), reps)
        finally:
            os.environ.pop("VERDE_COMMIT_ON_DEVICE")
        return gb / wall
    device, host = timed(True), timed(False)
    return {"mb": mb, "bytes": x.numel() * 4, "chunk_elements": chunk, "device_gbps": device, "host_gbps": host,
            "device_vs_host": device / host, "same_root": roots[True] == roots[False],
            "gpu": torch.cuda.get_device_name()}


def main_gpu(args) -> None:
    rows = [measure_gpu(mb, args.chunk, args.reps) for mb in args.sizes_mb]
    table = Table(title=f"CUDA tensor commitment (float32, chunk {args.chunk} elements, best of {args.reps})")
    for c in ("MB", "on the GPU GB/s", "download + host GB/s", "ratio", "same root"):
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(str(r["mb"]), f"{r['device_gbps']:.1f}", f"{r['host_gbps']:.2f}", f"{r['device_vs_host']:.1f}",
                      str(r["same_root"]))
    Console().print(table)
    out = Path(args.out).with_name("commitments_gpu.json")
    out.write_text(json.dumps({"cpus": len(os.sched_getaffinity(0)), "rows": rows}, indent=1))
    print(f"wrote {out}")
    if not all(r["same_root"] for r in rows):
        sys.exit("the GPU's root differs from the host's")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=None, help="default: 64 512 (cpu), 1024 (cuda)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--chunk", type=int, default=256, help="elements a chunk (the job default: 256)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "commitments.json"))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    args.sizes_mb = args.sizes_mb or ([1024] if args.device == "cuda" else [64, 512])
    if args.device == "cuda":
        return main_gpu(args)
    if chunktree.lib() is None:
        sys.exit("the C chunk tree is unavailable (see the warning above): nothing to measure")
    rows = [measure(mb, args.threads, args.chunk, args.reps, python_path=i == 0) for i, mb in enumerate(args.sizes_mb)]
    table = Table(title=f"tensor commitment vs SHA-256 (float32, chunk {args.chunk} elements, best of {args.reps})")
    for c in (["MB", "sha256 GB/s (GB/CPU-s)"] + [f"commit {t}T GB/s (x sha, x sha/core; x sha a CPU-s)" for t in args.threads]
              + ["python GB/s"]):
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(str(r["mb"]), f"{r['sha256_gbps']:.2f} ({r['sha256_gb_per_cpu_s']:.2f})",
                      *[f"{c['gbps']:.2f} ({c['vs_sha256']:.2f}, {c['vs_sha256_per_core']:.2f}; {c['vs_sha256_per_cpu_s']:.2f})"
                        for c in (r["commit"][t] for t in args.threads)],
                      f"{r['python_gbps']:.2f}" if "python_gbps" in r else "-")
    Console().print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cpus": len(os.sched_getaffinity(0)), "cpu": _cpu_name(), "load_average": os.getloadavg(),
                               "rows": rows}, indent=1))
    print(f"wrote {out}")
    if not all(r["same_root_every_thread_count"] for r in rows):
        sys.exit("roots differ between thread counts")


def _cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
