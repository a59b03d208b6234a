"""Soak test of the Python soft-float against IEEE-754 hardware (numpy float32).

  python benchmarks/softfloat_soak.py                    # 10M random vectors per n-ary
                                                         # primitive + all 2^32 inputs
                                                         # of every unary primitive
  python benchmarks/softfloat_soak.py --random 1e6 --exhaustive sqrt rint

Workers are PyPy processes when `pypy3` is on PATH (apt-get install pypy3; ~50x faster
on this integer code), CPython otherwise (the ETA then says hours). The report is
rewritten after every primitive, so an interrupted soak can --resume.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain.softfloat import float32 as sf  # noqa: E402
from offchain.softfloat import check as chk  # noqa: E402

WORKER = ROOT / "offchain" / "softfloat" / "worker.py"
UNARY = sorted(n for n, (_, ar, _) in sf.PRIMITIVES.items() if ar == 1)
NARY = sorted(n for n, (_, ar, _) in sf.PRIMITIVES.items() if ar > 1)
CHUNK = 1 << 21


class Worker:
    """One soft-float worker process behind a lock (a thread owns it per request)."""

    def __init__(self, python: str):
        self.proc = subprocess.Popen([python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lock = threading.Lock()

    def run(self, header: dict, payload: bytes, count: int) -> np.ndarray:
        with self.lock:
            try:
                self.proc.stdin.write((json.dumps(header) + "\n").encode() + payload)
                self.proc.stdin.flush()
            except BrokenPipeError:
                raise RuntimeError(f"soft-float worker {WORKER} exited (code {self.proc.wait()}); "
                                   "its traceback is above") from None
            buf = self.proc.stdout.read(4 * count)
        if len(buf) != 4 * count:
            raise RuntimeError(f"worker died (exit {self.proc.poll()}) during {header}")
        return np.frombuffer(buf, dtype=np.uint32)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def _check(name, a, b, c, got, examples):
    want = chk.REFERENCE[name](a, b, c)
    bad = chk.mismatches(name, got, want)
    for j in np.flatnonzero(bad)[: max(0, 5 - len(examples))]:
        examples.append([f"{int(v):#010x}" for v in (a[j], b[j], c[j], got[j], want[j])])
    return int(bad.sum())


def soak_exhaustive(name, pool, workers):
    total, examples, bar = 0, [], tqdm(total=1 << 32, desc=f"{name} (all 2^32)", unit="op", unit_scale=True)

    def job(k):
        start = k * CHUNK
        got = workers[k % len(workers)].run({"op": name, "range": [start, CHUNK]}, b"", CHUNK)
        a = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32)
        z = np.zeros_like(a)
        bad = _check(name, a, z, z, got, examples)
        bar.update(CHUNK)
        return bad

    total = sum(pool.map(job, range((1 << 32) // CHUNK)))
    bar.close()
    return {"mode": "exhaustive", "count": 1 << 32, "mismatches": total, "examples": examples}


def soak_random(name, n, pool, workers, seed):
    examples, bar = [], tqdm(total=n, desc=f"{name} (random)", unit="op", unit_scale=True)
    chunks = [(k, min(CHUNK, n - k * CHUNK)) for k in range((n + CHUNK - 1) // CHUNK)]

    def job(kc):
        k, m = kc
        rng = np.random.default_rng([seed, sf.PRIMITIVES[name][0], k])
        a, b, c = chk.operands(name, m, rng, edges=(k == 0))
        got = workers[k % len(workers)].run({"op": name, "arrays": len(a)}, a.tobytes() + b.tobytes() + c.tobytes(), len(a))
        bad = _check(name, a, b, c, got, examples)
        bar.update(m)
        return bad, len(a)

    res = list(pool.map(job, chunks))
    bar.close()
    return {"mode": "random", "count": sum(r[1] for r in res), "mismatches": sum(r[0] for r in res), "examples": examples}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", type=float, default=10_000_000, help="random vectors per n-ary primitive")
    ap.add_argument("--exhaustive", nargs="*", default=UNARY, help="unary primitives to sweep over all 2^32 inputs")
    ap.add_argument("--only", nargs="*", default=NARY, help="n-ary primitives to soak with random vectors")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "softfloat_soak.json")
    ap.add_argument("--resume", action="store_true", help="skip primitives already in --out")
    args = ap.parse_args()

    python = shutil.which("pypy3")
    if python is None:
        python = sys.executable
        print("pypy3 not found: workers run on CPython (~50x slower; the exhaustive sweep takes days). "
              "Install it with `apt-get install pypy3`.", file=sys.stderr)
    report = json.loads(args.out.read_text()) if args.resume and args.out.exists() else {"results": {}}
    report.update({"worker_python": subprocess.run([python, "-VV"], capture_output=True, text=True).stdout.strip(),
                   "numpy": np.__version__, "cpu": _cpu()})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    workers = [Worker(python) for _ in range(args.workers)]
    try:
        with ThreadPoolExecutor(len(workers)) as pool:
            plan = [(n, "random") for n in args.only] + [(n, "exhaustive") for n in args.exhaustive]
            for name, mode in plan:
                key = f"{name}/{mode}"
                if key in report["results"]:
                    continue
                t = time.time()
                r = (soak_exhaustive(name, pool, workers) if mode == "exhaustive"
                     else soak_random(name, int(args.random), pool, workers, args.seed))
                r["seconds"] = round(time.time() - t, 1)
                report["results"][key] = r
                args.out.write_text(json.dumps(report, indent=1))
                print(f"{key:28s} {r['count']:>13,d} vectors  {r['mismatches']} mismatches  {r['seconds']:8.1f} s",
                      flush=True)
    finally:
        for w in workers:
            w.close()
    bad = {k: v["mismatches"] for k, v in report["results"].items() if v["mismatches"]}
    print(f"\n{len(report['results'])} soaks, mismatches: {bad or 'none'}; report: {args.out}")
    return 1 if bad else 0


def _cpu():
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
